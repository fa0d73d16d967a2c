"""A deployment root: its layout, its releases, deploying into it, its Lmod trees and its
FDB configuration."""
