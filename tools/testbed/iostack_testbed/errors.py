"""What stops a test bed, in one line."""


class TestbedError(RuntimeError):
    """The test bed cannot do what was asked; the message says why."""
