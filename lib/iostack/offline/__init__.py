"""A node's set-up, from the network or from an offline bundle, and writing bundles."""
