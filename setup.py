"""Install the card's top-level folders into the `irforge` namespace (package-dir mapping)."""

from setuptools import find_packages, setup

PACKAGE_DIR = {
    "irforge": "irforge",
    "irforge.dialects": "dialects",
    "irforge.passes": "passes",
    "irforge.pipelines": "pipelines",
    "irforge.tools": "tools",
}
packages = [f"{pkg}.{sub}" for pkg, folder in PACKAGE_DIR.items() for sub in find_packages(folder)]
packages = sorted(set(PACKAGE_DIR) | {p for p in packages if not p.startswith("irforge.irforge")})

setup(
    packages=packages,
    package_dir=PACKAGE_DIR,
    package_data={"": ["*.lark", "*.pipeline", "*.cuh"]},
)
