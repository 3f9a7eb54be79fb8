"""dh: durable supervision for coding-agent harnesses."""
__version__ = "0.1.0"
