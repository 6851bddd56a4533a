"""enrich: decodes JSON orders, adds fields, and routes each to one of two
topics by amount; an order that does not decode, or has no id, is
dead-lettered. It shows the typed JSON helper and a strict config."""

from dataclasses import dataclass
from typing import Optional

import streamrun


@dataclass
class Config:
    large: str  # topic for orders of at least `threshold`
    small: str  # topic for the rest
    threshold: float = 1000
    source: str = "streamrun-enrich"  # written into every order


@dataclass
class Order:
    id: str
    amount: float
    currency: str = "EUR"
    customer: Optional[str] = None


@dataclass
class Enriched:
    id: str
    amount: float
    currency: str
    customer: Optional[str]
    size: str
    source: str
    received_ms: int


cfg = Config(large="", small="")  # set by init


def init(info: streamrun.Info) -> None:
    global cfg
    # Strict: an unknown key in the pipeline file fails the start, naming it.
    cfg = info.config_as(Config)
    if not cfg.large or not cfg.small:
        raise ValueError('"large" and "small" are required')


@streamrun.json_handler
def enrich(order: Order, m: streamrun.Message):
    if not order.id:
        return streamrun.DeadLetter("order without id")
    big = order.amount >= cfg.threshold
    out = Enriched(id=order.id, amount=order.amount, currency=order.currency, customer=order.customer,
                   size="large" if big else "small", source=cfg.source, received_ms=m.publish_time_ms)
    return streamrun.Emit(topic=cfg.large if big else cfg.small, key=order.id, value=out,
                          properties={"size": out.size})


if __name__ == "__main__":
    streamrun.serve(enrich, init=init)
