"""SSE streams of committed messages and blocks, fanned out from the node or from Redis Streams (routes and
the service's lifecycle in `routes`). See docs/events.md."""
