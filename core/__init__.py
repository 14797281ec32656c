"""What every app shares and none owns: plain helpers that import nothing of the apps above them.

The bottom layer of the import contract (``.importlinter``): accounts, billing, instances, storage,
apps_marketplace and console may import from here; nothing here imports from them.
"""
