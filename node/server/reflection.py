"""gRPC server reflection, both versions clients ask for: `grpc.reflection.v1.ServerReflection` and the
older `grpc.reflection.v1alpha.ServerReflection`, answered by one servicer from the default descriptor pool.

grpcio-reflection ships only the v1alpha service. The two versions are the same protocol (the same messages,
field for field, under another package name), so the v1 service is described by a file derived at start-up
from the installed v1alpha descriptor (package and type names rewritten) and served by the same
`ServerReflectionInfo` behaviour with the v1alpha serializers. Both are listed by `list_services` and both
are described to clients that ask (`buf curl --reflect-protocol grpc-v1` or `grpc-v1alpha`).

    servicer = reflection_servicer([CHAIN_SERVICE, ...])
    add_reflection_to_server(servicer, server)   # the native grpc.aio server, or the gRPC-web collector
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc


class ReflectionServicer(Protocol):
    """grpcio-reflection's asyncio servicer, as this module uses it."""

    def ServerReflectionInfo(self, request_iterator: Any, context: Any) -> Any: ...


# The asyncio servicer is public (`reflection.__all__` exports `aio`); the type stubs leave `aio` out.
AsyncReflectionServicer: Callable[[Sequence[str]], ReflectionServicer] = reflection.aio.ReflectionServicer  # type: ignore[attr-defined]

V1ALPHA_PACKAGE = "grpc.reflection.v1alpha"
V1_PACKAGE = "grpc.reflection.v1"
V1ALPHA_SERVICE = f"{V1ALPHA_PACKAGE}.ServerReflection"
V1_SERVICE = f"{V1_PACKAGE}.ServerReflection"
V1_FILE = "grpc/reflection/v1/reflection.proto"
METHOD = "ServerReflectionInfo"


def _v1_file() -> descriptor_pb2.FileDescriptorProto:
    """The v1 reflection file: the installed v1alpha file under the v1 package (wire-identical)."""
    file = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(file)
    file.name = V1_FILE
    file.package = V1_PACKAGE
    file.ClearField("options")
    old, new = f".{V1ALPHA_PACKAGE}.", f".{V1_PACKAGE}."
    for message in file.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = field.type_name.replace(old, new)
    for service in file.service:
        for method in service.method:
            method.input_type = method.input_type.replace(old, new)
            method.output_type = method.output_type.replace(old, new)
    return file


def describe_v1() -> None:
    """Add the v1 reflection file to the default descriptor pool (once: a second call finds it there)."""
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(V1_FILE)
    except KeyError:
        pool.Add(_v1_file())


def reflection_servicer(service_names: Sequence[str]) -> ReflectionServicer:
    """A servicer describing `service_names` and both reflection services."""
    describe_v1()
    return AsyncReflectionServicer((*service_names, V1_SERVICE, V1ALPHA_SERVICE))


def add_reflection_to_server(servicer: ReflectionServicer, server: Any) -> None:
    """Register v1alpha (generated code) and v1 (the same behaviour) on `server`, in the shape of a generated
    `add_XServicer_to_server` (so the gRPC-web endpoint can collect them too)."""
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    handlers = {
        METHOD: grpc.stream_stream_rpc_method_handler(
            servicer.ServerReflectionInfo,
            request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
            response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
        )
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(V1_SERVICE, handlers),))
    server.add_registered_method_handlers(V1_SERVICE, handlers)
