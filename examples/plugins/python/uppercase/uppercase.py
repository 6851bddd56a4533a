"""uppercase: publishes each message's payload, uppercased, to the topic
named in the handler config ("output"), keeping its key and properties."""

import streamrun

output = ""


def init(info: streamrun.Info) -> None:
    global output
    output = (info.config or {}).get("output", "")
    if not output:
        raise ValueError('"output" is required')


def upper(m: streamrun.Message) -> streamrun.Output:
    return streamrun.Output(topic=output, key=m.key, properties=m.properties, payload=m.payload.upper())


if __name__ == "__main__":
    streamrun.serve(upper, init=init)
