"""gpuctl: the GPU console from the terminal, and a typed SDK of its REST API (``gpuctl.Client``)."""

from gpuctl.api import Client
from gpuctl.client import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    RateLimited,
    ServerError,
    TooLarge,
    Unauthorized,
    Unavailable,
)

__all__ = [
    "ApiError",
    "BadRequest",
    "Client",
    "Conflict",
    "Forbidden",
    "NotFound",
    "RateLimited",
    "ServerError",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
]
__version__ = "0.2.0"
