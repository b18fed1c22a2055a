"""specdebug: debug speculative-decoding inference servers on remote GPU boxes over SSH."""

__version__ = "0.1.0"
