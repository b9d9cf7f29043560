"""Synthetic response targets for tool calling: a question, the tool's call and output, the answer.

RLLA's targets that answer in text (``<response>``) are the ones whose reward the hardened profile
judges on content, and the shipped fixtures hold only a few. :func:`make_response_examples` writes
hundreds in RLLA's layout (``instruction``, ``input``, ``output``): the user asks, the dialogue holds the
assistant's call and the tool's output (``<obs>...</obs>``), and the target states the output's values
in a sentence. Each example also carries the right answer in other words (``paraphrase``) and the
target's sentence with one fact changed (``wrong_fact``), the honest and dishonest controls of the
reward tests. ``kind="call_response"`` targets repeat the call before the response, as RLLA's do.

Held-out examples (``split="test"``) use other cities, symbols and flights and another phrasing of each
question, so no held-out question occurs in the training split.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corrgrpo_tasks.tool_calling._data import TOOL_SYSTEM_PROMPT

__all__ = ["ResponseExample", "make_response_examples"]

_CITIES = ("Paris", "Oslo", "Lima", "Cairo", "Seoul", "Quito", "Hanoi", "Boston", "Dublin", "Prague")
_SYMBOLS = ("AAPL", "MSFT", "NVDA", "TSLA", "AMZN", "ORCL", "INTC", "ADBE")
_AIRLINES = ("LH", "AF", "BA", "KL", "IB", "AZ")
_CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CHF", "SEK")
_CONDITIONS = ("sunny", "cloudy", "rainy", "windy", "foggy")
_TOOLS = {
    "get_time": "Current local time in a city. Parameters: {city: string}",
    "get_weather": "Current weather in a city. Parameters: {city: string}",
    "convert_currency": "Convert money. Parameters: {amount: number, source: string, target: string}",
    "get_stock_price": "Latest share price. Parameters: {symbol: string}",
    "get_flight_status": "Gate and departure time of a flight. Parameters: {flight: string}",
    "get_distance": "Road distance in km. Parameters: {origin: string, destination: string}",
}


@dataclass(frozen=True)
class ResponseExample:
    """One RLLA-layout record with its controls: the right answer in other words and a wrong fact."""

    instruction: str
    input: str
    output: str
    paraphrase: str
    wrong_fact: str

    def record(self) -> dict[str, str]:
        return {"instruction": self.instruction, "input": self.input, "output": self.output}


@dataclass(frozen=True)
class _Scene:
    name: str
    params: dict[str, Any]
    observation: dict[str, Any]
    questions: tuple[str, str, str]
    answer: str  # the target's sentence, formatted with ``values``
    paraphrase: str
    values: dict[str, Any]
    wrong: dict[str, Any]  # the values with one fact changed


def _hhmm(rng: random.Random) -> str:
    return f"{rng.randrange(24):02d}:{rng.randrange(60):02d}"


def _other(rng: random.Random, value: Any, draw: Callable[[], Any]) -> Any:
    while (other := draw()) == value:
        pass
    return other


def _time(rng: random.Random, cities: tuple[str, ...]) -> _Scene:
    city, t = rng.choice(cities), _hhmm(rng)
    return _Scene(
        "get_time",
        {"city": city},
        {"time": t},
        ("What time is it in {city}?", "Can you tell me the current time in {city}?", "Clock check: {city}?"),
        "It is {time} in {city}.",
        "Right now the clock in {city} shows {time}.",
        {"city": city, "time": t},
        {"city": city, "time": _other(rng, t, lambda: _hhmm(rng))},
    )


def _weather(rng: random.Random, cities: tuple[str, ...]) -> _Scene:
    city, temp, cond = rng.choice(cities), rng.randrange(-10, 36), rng.choice(_CONDITIONS)
    return _Scene(
        "get_weather",
        {"city": city},
        {"temperature_c": temp, "condition": cond},
        ("How is the weather in {city}?", "What's it like outside in {city} today?", "Weather for {city}?"),
        "It is {temp} degrees and {cond} in {city}.",
        "{city} has {cond} weather at {temp} degrees right now.",
        {"city": city, "temp": temp, "cond": cond},
        {"city": city, "temp": temp + rng.choice((-3, -2, -1, 1, 2, 3)), "cond": cond},
    )


def _currency(rng: random.Random, cities: tuple[str, ...]) -> _Scene:
    source, target = rng.sample(_CURRENCIES, 2)
    amount = rng.choice((5, 20, 50, 100, 250, 1000))
    result = round(amount * rng.uniform(0.5, 1.6), 2)
    v = {"amount": amount, "source": source, "target": target, "result": result}
    return _Scene(
        "convert_currency",
        {"amount": amount, "source": source, "target": target},
        {"result": result},
        (
            "How much is {amount} {source} in {target}?",
            "Convert {amount} {source} to {target} for me, please.",
            "{amount} {source} is how many {target}?",
        ),
        "{amount} {source} is {result} {target}.",
        "That comes to {result} {target}.",
        v,
        {**v, "result": round(result + rng.choice((-1, 1)) * rng.uniform(1, 9), 2)},
    )


def _stock(rng: random.Random, symbols: tuple[str, ...]) -> _Scene:
    symbol, price = rng.choice(symbols), round(rng.uniform(20, 900), 2)
    return _Scene(
        "get_stock_price",
        {"symbol": symbol},
        {"price": price},
        (
            "What is {symbol} trading at?",
            "Give me the latest share price of {symbol}.",
            "Quote for {symbol}?",
        ),
        "{symbol} is trading at {price} dollars.",
        "The latest quote for {symbol} is {price} dollars a share.",
        {"symbol": symbol, "price": price},
        {"symbol": symbol, "price": round(price * rng.choice((0.9, 0.95, 1.05, 1.1)), 2)},
    )


def _gate(rng: random.Random) -> str:
    return f"{rng.choice('ABCDE')}{rng.randrange(1, 40)}"


def _flight(rng: random.Random, airlines: tuple[str, ...]) -> _Scene:
    flight, gate, dep = f"{rng.choice(airlines)}{rng.randrange(100, 1000)}", _gate(rng), _hhmm(rng)
    v = {"flight": flight, "gate": gate, "dep": dep}
    return _Scene(
        "get_flight_status",
        {"flight": flight},
        {"gate": gate, "departure": dep},
        (
            "When and where does {flight} board?",
            "What's the status of flight {flight}?",
            "{flight}: gate and time?",
        ),
        "Flight {flight} leaves from gate {gate} at {dep}.",
        "Your flight departs at {dep}; go to gate {gate}.",
        v,
        {**v, "gate": _other(rng, gate, lambda: _gate(rng))},
    )


def _distance(rng: random.Random, cities: tuple[str, ...]) -> _Scene:
    origin, destination = rng.sample(cities, 2)
    km = rng.randrange(40, 3000)
    v = {"origin": origin, "destination": destination, "km": km}
    return _Scene(
        "get_distance",
        {"origin": origin, "destination": destination},
        {"km": km},
        (
            "How far is {origin} from {destination} by road?",
            "What's the driving distance between {origin} and {destination}?",
            "{origin} to {destination}, how many km?",
        ),
        "The distance from {origin} to {destination} is {km} km.",
        "By road it is {km} km between {origin} and {destination}.",
        v,
        {**v, "km": km + rng.choice((-50, -10, 10, 50))},
    )


def _instruction() -> str:
    listing = "\n\n".join(f"Name: {n}\nDescription: {d}" for n, d in _TOOLS.items())
    return f"{TOOL_SYSTEM_PROMPT}\n\nAvailable tools:\n{listing}"


def make_response_examples(
    n: int, *, seed: int = 0, split: str = "train", kind: str = "response"
) -> list[ResponseExample]:
    """``n`` examples whose target answers in a ``<response>`` (``kind="response"``) or repeats the call
    and then answers (``kind="call_response"``), drawn with ``seed`` from ``split`` ("train" or "test":
    disjoint entities and question phrasings)."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if kind not in ("response", "call_response"):
        raise ValueError(f"kind must be 'response' or 'call_response', got {kind!r}")
    part = 0 if split == "train" else 1
    cities, symbols, airlines = _CITIES[part::2], _SYMBOLS[part::2], _AIRLINES[part::2]
    scenes: list[Callable[[random.Random], _Scene]] = [
        lambda r: _time(r, cities),
        lambda r: _weather(r, cities),
        lambda r: _currency(r, cities),
        lambda r: _stock(r, symbols),
        lambda r: _flight(r, airlines),
        lambda r: _distance(r, cities),
    ]
    rng = random.Random(f"{seed}:{split}:{kind}")
    instruction = _instruction()
    out = []
    for _ in range(n):
        scene = rng.choice(scenes)(rng)
        question = rng.choice(scene.questions[:2]) if split == "train" else scene.questions[2]
        call = json.dumps({"name": scene.name, "parameters": scene.params})
        block = f"<tool_call>\n{call}\n</tool_call>\n"
        dialogue = (
            f"User: {question.format(**scene.values)}\nAssistant: {block}"
            f"<obs>{json.dumps(scene.observation)}</obs>"
        )
        head = "<think>The tool answered; I report its values.</think>\n" + (
            block if kind == "call_response" else ""
        )
        out.append(
            ResponseExample(
                instruction=instruction,
                input=dialogue,
                output=f"{head}<response>{scene.answer.format(**scene.values)}</response>",
                paraphrase=f"{head}<response>{scene.paraphrase.format(**scene.values)}</response>",
                wrong_fact=f"{head}<response>{scene.answer.format(**scene.wrong)}</response>",
            )
        )
    return out
