"""ferry's command line (placeholder)."""
def run() -> None: raise NotImplementedError
