"""Pinned versions of what set-up fetches. Bump them here, and only here."""

SPACK_URL = "https://github.com/spack/spack.git"
SPACK_TAG = "v1.1.0"
SPACK_COMMIT = "2e907202bcc8209a6a62243aab50c179b524cc3b"
SPACK_MIN_VERSION = (1, 1)

SPACK_PACKAGES_URL = "https://github.com/spack/spack-packages.git"
SPACK_PACKAGES_TAG = "v2025.11.0"
SPACK_PACKAGES_COMMIT = "119680aeee8ea802c6111b7167583bddef97e82f"

# actionlint for the workflow lint test, through the Go module proxy.
ACTIONLINT_MODULE = "github.com/rhysd/actionlint/cmd/actionlint@v1.7.7"
