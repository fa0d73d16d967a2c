"""iostack's Spack extension (config:extensions in spack-env/common/config.yaml): `spack
offsite`. Spack imports it as spack.extensions.iostack."""
