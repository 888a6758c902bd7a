"""Every `web.AppKey` of the gateway's application, in one leaf module.

    app[CONFIG], app[NODES]       # set by gateway.app.build_app
    app[CLIENTS]                  # who a request comes from (gateway.clientip, --trusted-proxies)
    app[BODIES]                   # REST bodies by the node answer they were made from (gateway.rest.memo)
    app[EVENTS]                   # the events service (gateway.events.routes)
    app[METRICS]                  # the gateway's instruments, when metrics are served
    app[DOCUMENT], app[OPENAPI]   # the OpenAPI document and its validator (the compiled checks sit on
                                  # each REST route's handler, gateway/rest/routes.py)
    app[CORS]                     # the CORS rule (node.grpcweb.cors), shared with the node's gRPC-web
    app[GRPC_WEB_SESSION]         # the HTTP client of the gRPC-web passthrough

This module imports the types the keys hold and nothing that registers routes or builds the app, so any
module may read a key without importing the app factory (gateway.app) and without an import cycle.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web
from openapi_core import OpenAPI

from gateway.clientip import ClientAddress
from gateway.config import GatewayConfig
from gateway.events.service import EventService
from gateway.rest.memo import BodyMemo
from gateway.rest.shapes import Schema
from gateway.telemetry import GatewayMetrics
from gateway.upstream import NodePool
from node.grpcweb.cors import CorsPolicy

CONFIG: web.AppKey[GatewayConfig] = web.AppKey("config", GatewayConfig)
NODES: web.AppKey[NodePool] = web.AppKey("nodes", NodePool)
CLIENTS: web.AppKey[ClientAddress] = web.AppKey("clients", ClientAddress)
BODIES: web.AppKey[BodyMemo] = web.AppKey("bodies", BodyMemo)
EVENTS: web.AppKey[EventService] = web.AppKey("events", EventService)
METRICS: web.AppKey[GatewayMetrics] = web.AppKey("metrics", GatewayMetrics)
DOCUMENT: web.AppKey[Schema] = web.AppKey("openapi_document", dict)
OPENAPI: web.AppKey[OpenAPI] = web.AppKey("openapi", OpenAPI)
CORS: web.AppKey[CorsPolicy] = web.AppKey("cors", CorsPolicy)
GRPC_WEB_SESSION: web.AppKey[aiohttp.ClientSession] = web.AppKey("grpc_web_session", aiohttp.ClientSession)
