"""The API's routes, one module per area; each builds an ``APIRouter`` for one server."""

from deermem.service.http.routes import facts, learning, mem0, meta, recall, records

__all__ = ["facts", "learning", "mem0", "meta", "recall", "records"]
