# Experiment only (applied on the device copy): with $IRFORGE_CLUSTER_PARTIAL set, a split's first kernel (its
# name ends in _partial) is launched in clusters of its blocks along y, though it reads no other block's memory:
# does the cluster launch alone slow it?
from pathlib import Path

p = Path("passes/kernel_to_cuda/kernel_to_cuda.py")
s = p.read_text()
old = """        cluster = self.k.attributes.get("cluster")
        if cluster is None:
            return \"\""""
new = """        cluster = self.k.attributes.get("cluster")
        import os

        gy = self.k.attributes["grid"][1]
        if os.environ.get("IRFORGE_CLUSTER_PARTIAL") and self.kernel_name().endswith("_partial") and 1 < gy <= 8:
            return f"__cluster_dims__(1, {gy}, 1) "
        if cluster is None:
            return \"\""""
assert old in s
p.write_text(s.replace(old, new))
print("patched")
