import pytest


def pytest_report_header(config: pytest.Config) -> str:
    import kernel_lib  # imported after --tagged-ops-fallback took effect

    return f"kernel_lib ops take the {'native' if kernel_lib.scale_.is_native else 'fallback'} path"
