"""``chainctl``: the command line over the SDK (node.sdk), with a local key store (``config``)."""
