"""The one error the NKI model raises: a kernel broke a rule the NKI tracer or compiler enforces.

Its own module, below the tensor and the generations, so both can raise it without importing each other.
"""


class NkiError(ValueError):
    """A kernel broke a rule the NKI tracer or compiler enforces."""
