"""A real MCP client for hearsay's MCP suite: the official Python SDK (`mcp` from PyPI).

    python client.py PLAN.json

PLAN.json: {"command": ..., "args": [...], "calls": [{"tool": ..., "arguments": {...}}
| {"sleep": seconds} | {"until_found": {"tool": ..., "arguments": {...}, "contains": text,
"timeout": seconds}} | {"read_resource": uri}]}. Starts the server over stdio, initializes,
lists the tools and the resources, makes every call in order and prints one JSON object:
the server's name and protocol version, the tools with their schemas, the resources, and
each call's outcome (structured content, text and `is_error`, a resource's contents, or
the MCP error's code and message). The assertions live in the Rust suite (tests/mcp.rs).
"""

import asyncio
import json
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError


async def call(session, tool, arguments):
    try:
        r = await session.call_tool(tool, arguments)
    except MCPError as e:
        return {"tool": tool, "error": {"code": e.error.code, "message": e.error.message}}
    text = [c.text for c in r.content if getattr(c, "type", "") == "text"]
    return {"tool": tool, "is_error": bool(r.is_error), "structured": r.structured_content, "text": text}


async def fetch_resource(session, uri):
    try:
        r = await session.read_resource(uri)
    except MCPError as e:
        return {"resource": uri, "error": {"code": e.error.code, "message": e.error.message}}
    return {"resource": uri, "contents": [
        {"uri": str(c.uri), "mime_type": c.mime_type, "text": getattr(c, "text", None)}
        for c in r.contents
    ]}


async def main():
    plan = json.load(open(sys.argv[1]))
    params = StdioServerParameters(command=plan["command"], args=plan["args"])
    out = {"calls": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["server"] = init.server_info.name
            out["protocol"] = init.protocol_version
            tools = await session.list_tools()
            out["tools"] = [
                {"name": t.name, "description": t.description,
                 "input_schema": t.input_schema, "output_schema": t.output_schema}
                for t in tools.tools
            ]
            resources = await session.list_resources()
            out["resources"] = [
                {"uri": str(r.uri), "name": r.name, "mime_type": r.mime_type, "size": r.size}
                for r in resources.resources
            ]
            for step in plan["calls"]:
                if "read_resource" in step:
                    out["calls"].append(await fetch_resource(session, step["read_resource"]))
                elif "sleep" in step:
                    await asyncio.sleep(step["sleep"])
                elif "until_found" in step:
                    u = step["until_found"]
                    deadline = time.monotonic() + u.get("timeout", 30)
                    while True:
                        r = await call(session, u["tool"], u["arguments"])
                        if u["contains"] in json.dumps(r) or time.monotonic() > deadline:
                            r["waited"] = True
                            out["calls"].append(r)
                            break
                        await asyncio.sleep(0.2)
                else:
                    out["calls"].append(await call(session, step["tool"], step.get("arguments", {})))
    print(json.dumps(out))


asyncio.run(main())
