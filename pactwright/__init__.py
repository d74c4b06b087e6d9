"""pactwright: policies about money and side effects, made provable and traceable.

The kernel holds what every room shares: canonical bytes and hashing,
exact money, diagnostics and the error hierarchy.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
