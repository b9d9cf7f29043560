"""Synthetic tool-calling data: a catalogue of typed functions, requests phrased several ways, and
targets in the ``<tool_call>`` JSON layout the RLLA reward scores.

Each example lists three candidate tools (the right one among two distractors, in random order) and a
request; the target names the right tool and fills every parameter from the request. Values are typed
(JSON strings, integers, numbers, enums), and some need a small rewrite (``"in Fahrenheit"`` ->
``"fahrenheit"``, ``"eight people"`` -> ``8``), so copying alone is not enough. Train and held-out
examples come from disjoint random streams, and no held-out prompt text occurs in the training set.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ._examples import Example, split_examples

__all__ = ["CATALOGUE", "VALUE_WORDS", "Tool", "make_tool_examples", "tool_pieces"]

_CITIES = (
    "Paris",
    "Berlin",
    "Madrid",
    "Lisbon",
    "Oslo",
    "Vienna",
    "Prague",
    "Dublin",
    "Rome",
    "Athens",
    "Warsaw",
    "Zurich",
    "Tokyo",
    "Lima",
    "Cairo",
    "Seoul",
    "Quito",
    "Delhi",
    "Hanoi",
    "Boston",
)
_NAMES = ("Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jon", "Kim", "Lea", "Max", "Nia")
_ARTISTS = ("Adele", "Queen", "Bjork", "Muse", "Drake", "Sade", "Abba", "Moby", "Enya", "Toto")
_TOPICS = ("sports", "science", "politics", "music", "travel", "health", "finance", "weather")
_LANGS = {
    "fr": "French",
    "de": "German",
    "es": "Spanish",
    "it": "Italian",
    "ja": "Japanese",
    "pl": "Polish",
    "el": "Greek",
}
_AIRPORTS = {
    "Paris": "CDG",
    "Berlin": "BER",
    "Madrid": "MAD",
    "Lisbon": "LIS",
    "Oslo": "OSL",
    "Vienna": "VIE",
    "Prague": "PRG",
    "Dublin": "DUB",
    "Rome": "FCO",
    "Athens": "ATH",
    "Warsaw": "WAW",
    "Zurich": "ZRH",
    "Tokyo": "HND",
    "Lima": "LIM",
    "Cairo": "CAI",
    "Seoul": "ICN",
    "Quito": "UIO",
    "Delhi": "DEL",
    "Hanoi": "HAN",
    "Boston": "BOS",
}
_PHRASES = (
    "good morning",
    "thank you",
    "see you soon",
    "where is the station",
    "how much is it",
    "happy birthday",
    "I am lost",
    "the bill please",
)
_FOODS = ("rice", "eggs", "tofu", "beans", "lentils", "pasta", "salmon", "spinach")
# Canonical values and how a request may say them instead (the call must use the canonical value).
_CURRENCIES = {
    "USD": "dollars",
    "EUR": "euros",
    "GBP": "pounds",
    "JPY": "yen",
    "CHF": "francs",
    "CAD": "Canadian dollars",
    "SEK": "kronor",
}
_SYMBOLS = {
    "AAPL": "Apple",
    "MSFT": "Microsoft",
    "NVDA": "Nvidia",
    "TSLA": "Tesla",
    "AMZN": "Amazon",
    "IBM": "IBM",
    "ORCL": "Oracle",
    "SAP": "SAP",
}
_MINUTES = {15: "a quarter of an hour", 30: "half an hour", 45: "three quarters of an hour", 60: "an hour"}
_RESTAURANTS = ("Luigi's", "Blue Fin", "Casa Rosa", "Green Leaf", "Hot Pot", "Le Coq", "Taj", "Wok On")
_WORDS = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
)
_LABELS = ("gym", "work", "pills", "call mom", "meeting", "bus")
_SUBJECTS = ("lunch", "invoice", "the trip", "budget", "party", "report")
_ERRANDS = ("pay rent", "buy milk", "water plants", "renew passport", "book dentist")
_PICKUPS = ("the airport", "Main Street", "the hotel", "the station", "Pier 9")
_UNITS = {
    "celsius": ("Celsius", "C", "celsius degrees"),
    "fahrenheit": ("Fahrenheit", "F", "fahrenheit degrees"),
}
_SIZES = {"small": "little", "medium": "regular", "large": "big"}
SAID = 0.9  # how often a request says a value its own way (a word, a name, a synonym) when it has one


def _said(rng: random.Random, value: object, words: str) -> str:
    """How the request phrases ``value``: ``words`` with probability SAID, else the value itself."""
    return words if rng.random() < SAID else str(value)


def _time(rng: random.Random) -> str:
    return f"{rng.randint(6, 22):02d}:{rng.choice((0, 15, 30, 45)):02d}"


def _date(rng: random.Random) -> str:
    return f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


@dataclass(frozen=True)
class Tool:
    """One function: parameter names, a sampler of (parameter values, words to phrase them with), and
    request templates over those words."""

    name: str
    params: tuple[str, ...]
    sample: Callable[[random.Random], tuple[dict[str, object], dict[str, str]]]
    templates: tuple[str, ...]


def _count(rng: random.Random, low: int, high: int) -> tuple[int, str]:
    n = rng.randint(low, high)
    return n, _said(rng, n, _WORDS[n]) if n < len(_WORDS) else str(n)


def _weather(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    city, unit = rng.choice(_CITIES), rng.choice(tuple(_UNITS))
    return {"city": city, "unit": unit}, {"city": city, "unit": rng.choice(_UNITS[unit])}


def _table(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    n, words = _count(rng, 1, 12)
    place, at = rng.choice(_RESTAURANTS), _time(rng)
    return {"restaurant": place, "people": n, "time": at}, {"restaurant": place, "people": words, "time": at}


def _currency(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    amount = rng.choice((rng.randint(1, 999), round(rng.uniform(1, 500), 2)))
    src, dst = rng.sample(tuple(_CURRENCIES), 2)
    return (
        {"amount": amount, "from_currency": src, "to_currency": dst},
        {
            "amount": str(amount),
            "from_currency": _said(rng, src, _CURRENCIES[src]),
            "to_currency": _said(rng, dst, _CURRENCIES[dst]),
        },
    )


def _alarm(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    at, label = _time(rng), rng.choice(_LABELS)
    return {"time": at, "label": label}, {"time": at, "label": label}


def _email(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    name = rng.choice(_NAMES)
    to = f"{name.lower()}@{rng.choice(('mail.com', 'work.org', 'home.net'))}"
    subject = rng.choice(_SUBJECTS)
    return {"to": to, "subject": subject}, {"to": to, "subject": subject}


def _flights(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    src, dst = (_AIRPORTS[c] for c in rng.sample(_CITIES, 2))
    day = _date(rng)
    city = {code: name for name, code in _AIRPORTS.items()}
    return {"origin": src, "destination": dst, "date": day}, {
        "origin": _said(rng, src, city[src]),
        "destination": _said(rng, dst, city[dst]),
        "date": day,
    }


def _music(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    artist = rng.choice(_ARTISTS)
    return {"artist": artist}, {"artist": artist}


def _translate(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    text, lang = rng.choice(_PHRASES), rng.choice(tuple(_LANGS))
    return {"text": text, "target_language": lang}, {
        "text": text,
        "target_language": _said(rng, lang, _LANGS[lang]),
    }


def _stock(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    symbol = rng.choice(tuple(_SYMBOLS))
    return {"symbol": symbol}, {"symbol": _said(rng, symbol, _SYMBOLS[symbol])}


def _reminder(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    task = rng.choice(_ERRANDS)
    day = _date(rng)
    return {"task": task, "date": day}, {"task": task, "date": day}


def _pizza(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    size = rng.choice(tuple(_SIZES))
    n, words = _count(rng, 1, 6)
    return {"size": size, "quantity": n}, {"size": _said(rng, size, _SIZES[size]), "quantity": words}


def _taxi(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    n, words = _count(rng, 1, 5)
    place = rng.choice(_PICKUPS)
    return {"pickup": place, "passengers": n}, {"pickup": place, "passengers": words}


def _news(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    topic = rng.choice(_TOPICS)
    n, words = _count(rng, 1, 10)
    return {"topic": topic, "count": n}, {"topic": topic, "count": words}


def _tip(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    bill, pct = rng.randint(10, 300), rng.choice((10, 12, 15, 18, 20, 25))
    return {"bill": bill, "percent": pct}, {"bill": str(bill), "percent": str(pct)}


def _recipe(rng: random.Random) -> tuple[dict[str, object], dict[str, str]]:
    food, minutes = rng.choice(_FOODS), rng.choice((10, 15, 20, 30, 45, 60))
    said = _said(rng, minutes, _MINUTES[minutes]) if minutes in _MINUTES else str(minutes)
    return {"ingredient": food, "max_minutes": minutes}, {
        "ingredient": food,
        "max_minutes": said if said in _MINUTES.values() else f"{minutes} minutes",
    }


CATALOGUE: tuple[Tool, ...] = (
    Tool(
        "get_weather",
        ("city", "unit"),
        _weather,
        (
            "What is the weather in {city} in {unit}?",
            "Weather for {city} in {unit}, please.",
            "Tell me the forecast in {city}, in {unit}.",
            "How warm is it in {city} in {unit}?",
        ),
    ),
    Tool(
        "book_table",
        ("restaurant", "people", "time"),
        _table,
        (
            "Book a table at {restaurant} for {people} people at {time}.",
            "Reserve {restaurant} at {time} for {people}.",
            "I need a table for {people} at {restaurant}, {time}.",
        ),
    ),
    Tool(
        "convert_currency",
        ("amount", "from_currency", "to_currency"),
        _currency,
        (
            "Convert {amount} {from_currency} to {to_currency}.",
            ("How much is {amount} {from_currency} in {to_currency}?"),
            "Change {amount} {from_currency} into {to_currency}.",
        ),
    ),
    Tool(
        "set_alarm",
        ("time", "label"),
        _alarm,
        (
            "Set an alarm at {time} called {label}.",
            "Wake me at {time} for {label}.",
            "Alarm for {label} at {time}, please.",
        ),
    ),
    Tool(
        "send_email",
        ("to", "subject"),
        _email,
        (
            "Email {to} about {subject}.",
            "Send a mail to {to} with subject {subject}.",
            "Write to {to}, subject: {subject}.",
        ),
    ),
    Tool(
        "search_flights",
        ("origin", "destination", "date"),
        _flights,
        (
            "Find flights from {origin} to {destination} on {date}.",
            "Fly {origin} to {destination}, {date}?",
            "Any flight {date} from {origin} to {destination}?",
        ),
    ),
    Tool(
        "play_music",
        ("artist",),
        _music,
        ("Play some {artist}.", "Put on music by {artist}.", "I want to hear {artist}."),
    ),
    Tool(
        "translate_text",
        ("text", "target_language"),
        _translate,
        (
            "Translate '{text}' into {target_language}.",
            "How do you say '{text}' in {target_language}?",
            "{target_language} for '{text}', please.",
        ),
    ),
    Tool(
        "get_stock_price",
        ("symbol",),
        _stock,
        ("What is {symbol} trading at?", "Stock price of {symbol}.", "Quote {symbol} for me."),
    ),
    Tool(
        "create_reminder",
        ("task", "date"),
        _reminder,
        (
            "Remind me to {task} on {date}.",
            "On {date} I must {task}; remind me.",
            "Add a reminder: {task}, {date}.",
        ),
    ),
    Tool(
        "order_pizza",
        ("size", "quantity"),
        _pizza,
        (
            "Order {quantity} {size} pizzas.",
            "I want {quantity} pizzas, {size}.",
            "Get us {quantity} {size} pizza please.",
        ),
    ),
    Tool(
        "call_taxi",
        ("pickup", "passengers"),
        _taxi,
        (
            "Get a taxi at {pickup} for {passengers}.",
            "Taxi from {pickup}, {passengers} passengers.",
            "Send a cab to {pickup}; we are {passengers}.",
        ),
    ),
    Tool(
        "get_news",
        ("topic", "count"),
        _news,
        (
            "Show {count} news stories about {topic}.",
            "Latest {topic} news, {count} items.",
            "Give me {count} headlines on {topic}.",
        ),
    ),
    Tool(
        "calculate_tip",
        ("bill", "percent"),
        _tip,
        (
            "What is a {percent}% tip on {bill}?",
            "Tip {percent} percent of a {bill} bill.",
            "Compute the tip for {bill} at {percent}%.",
        ),
    ),
    Tool(
        "find_recipe",
        ("ingredient", "max_minutes"),
        _recipe,
        (
            "A recipe with {ingredient} in under {max_minutes}.",
            "Cook {ingredient}, at most {max_minutes}.",
            "Find a {ingredient} dish that takes {max_minutes}.",
        ),
    ),
)

THINK = "<think></think>\n"


def _signature(tool: Tool) -> str:
    return f"{tool.name}({', '.join(tool.params)})"


def _call_text(name: str, parameters: dict[str, object]) -> str:
    return f"{THINK}<tool_call>\n{json.dumps({'name': name, 'parameters': parameters})}\n</tool_call>"


def _one(rng: random.Random, catalogue: Sequence[Tool], normalise: float) -> Example:
    tool, *others = rng.sample(list(catalogue), 3)
    values, words = tool.sample(rng)
    request = rng.choice(tool.templates).format(**words)
    listed = [tool, *others]
    rng.shuffle(listed)
    content = "Tools: " + "; ".join(_signature(t) for t in listed) + "\nUser: " + request
    target = _call_text(tool.name, values)
    # The demonstration: a value the request says its own way is normalised with probability
    # `normalise`, else copied as said ("C", "six", "dollars"). Its own random stream (keyed by the
    # prompt), so the prompts and targets do not depend on `normalise`.
    coin = random.Random(f"demo-{content}")
    shown = {p: v if str(v) == words[p] or coin.random() < normalise else words[p] for p, v in values.items()}
    return Example([{"role": "user", "content": content}], target, _call_text(tool.name, shown), tool.name)


def make_tool_examples(
    n_train: int,
    n_eval: int,
    *,
    seed: int = 0,
    catalogue: Sequence[Tool] = CATALOGUE,
    normalise: float = 1.0,
) -> tuple[list[Example], list[Example]]:
    """``n_train`` training and ``n_eval`` held-out examples; no held-out prompt text is in training.

    ``ground_truth`` is always the right call. ``completion`` (the supervised target) is a
    demonstrator's: each value the request says its own way (``in C``, ``six``, ``dollars``, ``big``,
    ``half an hour``) is normalised to the tool's value with probability ``normalise``, else copied as
    the request says it (a wrong value for the reward). ``normalise=1``: the right call.

    >>> train, held = make_tool_examples(4, 2)
    >>> train[0].ground_truth.startswith("<think></think>") and train[0].completion == train[0].ground_truth
    True
    """
    if not 0.0 <= normalise <= 1.0:
        raise ValueError(f"normalise must be in [0, 1], got {normalise}")
    return split_examples(
        lambda rng: _one(rng, catalogue, normalise), n_train, n_eval, name="tool", seed=seed
    )


# Values drawn from a closed set: whole tokens of the tiny tokenizer (numbers, times, dates and e-mail
# addresses stay byte-level).
VALUE_WORDS: tuple[str, ...] = (
    *_CITIES,
    *_AIRPORTS.values(),
    *_ARTISTS,
    *_TOPICS,
    *_LANGS,
    *_PHRASES,
    *_FOODS,
    *_CURRENCIES,
    *_SYMBOLS,
    *_RESTAURANTS,
    *_LABELS,
    *_SUBJECTS,
    *_ERRANDS,
    *_PICKUPS,
    *_UNITS,
    *_SIZES,
)
# How requests say some of them instead (whole tokens too, so normalising one is one choice).
SAID_WORDS: tuple[str, ...] = (
    *_CURRENCIES.values(),
    *_SYMBOLS.values(),
    *_MINUTES.values(),
    *_SIZES.values(),
    *_LANGS.values(),
    "Celsius",
    "Fahrenheit",
)


def tool_pieces(catalogue: Sequence[Tool] = CATALOGUE, *, values: bool = True) -> list[str]:
    """Whole tokens for the tiny tokenizer: the call scaffolding, tool names, quoted parameter keys and
    (``values``) the closed-set values of :data:`VALUE_WORDS` and the bare parameter names.

    They shorten a completion from ~80 bytes to ~12 tokens. A closed-set value is then one choice (which
    word of the request, or which rewrite: ``in F`` -> ``fahrenheit``), as the tool name is; numbers,
    times, dates and addresses are still copied byte by byte.
    """
    pieces = [THINK + '<tool_call>\n{"name": "', '", "parameters": {', "}}\n</tool_call>", ", "]
    pieces += sorted({t.name for t in catalogue})
    pieces += sorted({f'"{p}": ' for t in catalogue for p in t.params})
    if values:
        # Bare parameter names shorten the prompt's signatures (not "to": it is inside too many words).
        names = {p for t in catalogue for p in t.params if len(p) > 2}
        pieces += sorted((set(VALUE_WORDS) | set(SAID_WORDS) | names) - set(pieces))
    return pieces
