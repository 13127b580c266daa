"""The calculator example's tools: typed, documented functions, so transformers' `get_json_schema` reads
their JSON schema from the signature and the docstring (that schema is what the model is shown).

Neither runs code the model wrote: arguments are numbers, checked by type before any arithmetic.
"""


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    if not isinstance(a, int) or not isinstance(b, int):
        raise TypeError("multiply takes two integers")
    return a * b


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first term.
        b: The second term.
    """
    if not isinstance(a, int) or not isinstance(b, int):
        raise TypeError("add takes two integers")
    return a + b
