"""gpuctl's project folder; the package is src/gpuctl (this file only names its tests uniquely for pytest)."""
