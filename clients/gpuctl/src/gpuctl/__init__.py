"""gpuctl: the GPU console from the terminal, and a thin typed client of its REST API."""

from gpuctl.client import ApiError, Client

__all__ = ["ApiError", "Client"]
__version__ = "0.1.0"
