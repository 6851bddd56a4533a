"""The Python Pulsar Function of scripts/bench-functions: each message's
payload uppercased, published to the function's output topic, the same
work as the streamrun Python handler examples/plugins/python/uppercase.

The input arrives as Pulsar's default serde (IdentitySerDe) gives it: text
for a UTF-8 payload; its return value is published as UTF-8."""

from pulsar import Function


class UppercaseFunction(Function):
    def process(self, input, context):
        return input.upper()
