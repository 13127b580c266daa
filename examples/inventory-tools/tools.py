"""The inventory example's tools: four lookups in one warehouse table, so the model must choose the tool the
question asks about (price, stock or weight; the worked episodes before each question look up two shelves, which
no question asks for, and one stock), name the item exactly, and answer with the number returned.

The numbers are drawn once (seeded) and are nowhere in the prompt: an answer is right only by way of the right
call. An unknown tool argument raises, which the episode hands back to the model as the tool's error.
"""

from __future__ import annotations

import random

ITEMS = ("anvil", "bearing", "bolt", "bracket", "buckle", "cable", "caster", "chain", "clamp", "coupler", "crank",
         "damper", "dowel", "drum", "flange", "fuse", "gasket", "gear", "grommet", "hinge", "hook", "hose", "latch",
         "lever", "magnet", "nozzle", "nut", "pin", "piston", "pulley", "rivet", "rod", "roller", "seal", "shackle",
         "shaft", "shim", "socket", "spacer", "spring", "sprocket", "stud", "swivel", "switch", "tap", "thimble",
         "toggle", "valve", "washer", "wedge", "winch", "yoke")
_RNG = random.Random(39)
TABLE = {item: {"price": _RNG.randint(100, 9999), "stock": _RNG.randint(10, 999), "weight": _RNG.randint(5, 4999),
                "shelf": _RNG.randint(1, 60)} for item in ITEMS}


def _row(item: str) -> dict[str, int]:
    if not isinstance(item, str) or item.strip().lower() not in TABLE:
        raise KeyError(f"no item named {item!r} in the warehouse")
    return TABLE[item.strip().lower()]


def price(item: str) -> int:
    """Look up the price of one item, in cents.

    Args:
        item: The item's name, for example "bolt".
    """
    return _row(item)["price"]


def stock(item: str) -> int:
    """Look up how many units of one item are in stock.

    Args:
        item: The item's name, for example "bolt".
    """
    return _row(item)["stock"]


def weight(item: str) -> int:
    """Look up the weight of one item, in grams.

    Args:
        item: The item's name, for example "bolt".
    """
    return _row(item)["weight"]


def shelf(item: str) -> int:
    """Look up the number of the shelf that holds one item.

    Args:
        item: The item's name, for example "bolt".
    """
    return _row(item)["shelf"]
