"""iostack's test beds, which are not part of iostack: a throwaway single-node Slurm
(ReFrame system `local-slurm`), a throwaway multi-node cluster in namespaces
(`local-cluster`), both on this machine and as root, and the timing of the Lmod spider
cache. The tests and the nightly workflow use them; a site runs iostack on its own Slurm."""
