"""REST routes under /v1 (route table in `routes`), the OpenAPI document and its request validation, CORS
and the gRPC-web passthrough. See docs/rest.md."""
