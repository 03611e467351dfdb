"""deermem inside other agent frameworks: each sub-package binds one host's memory contract."""
