"""iostack: ties a site's Spack environment, Lmod tree, Ansible inventory and ReFrame
system together. Every subcommand prints the spack / ansible-playbook / reframe commands it
runs, so an admin can re-run any of them by hand."""
