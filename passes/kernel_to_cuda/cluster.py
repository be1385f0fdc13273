"""kernel-to-cuda's statements for thread block clusters (`dialects/kernel/cluster.py`): the kernel's
`__cluster_dims__`, the cluster barrier, another block's shared buffer (mapa to a generic pointer) and pushed
stores (st.async to its shared::cluster address, completing on its mbarrier)."""

from __future__ import annotations

from irforge.target import target
from irforge.types import TensorType


class ClusterStatements:
    """Mixed into the kernel emitter (it supplies `k`, `line`, `name`, `index`, `ctype`, `smem_offset`,
    `smem_address`)."""

    def cluster_dims(self) -> str:
        """`__cluster_dims__(x, y, z) ` for a kernel launched in clusters (a launch needs nothing more), else ''."""
        cluster = self.k.attributes.get("cluster")
        if cluster is None:
            return ""
        if target().sm < 90:
            raise self.k.error(f"needs sm_90 or later (thread block clusters), and the target is {target().arch}")
        return f"__cluster_dims__({', '.join(map(str, cluster))}) "

    def op_cluster_barrier(self, op):
        self.line("irf_cluster_sync();")

    def op_cluster_map(self, op):
        (rank,) = self.index(op, "rank")
        mem, r = op.operands[0], op.result
        self.line(f"{self.ctype(r.type.dtype)}* {self.name(r)} = irf_cluster_map({self.name(mem)}, {rank});")

    def op_store_async(self, op):
        v, t = op.value, op.value.type
        (rank,) = self.index(op, "rank")
        (bar_i,) = self.index(op, "bar_index")
        offset = self.smem_offset(op.exprs("index"), op.index_operands, op.mem.type, scale=4)
        n = t.numel if isinstance(t, TensorType) else 1
        chunk = 4 if n % 4 == 0 else 2 if n % 2 == 0 else 1  # the rows start at multiples of their length
        src = self.name(v) if isinstance(t, TensorType) else f"&{self.name(v)}"
        self.line(f"{{ const unsigned irf_dst = irf_mapa_shared({self.smem_address(op.mem, offset)}, {rank});")
        self.line(f"  const unsigned irf_bar = irf_mapa_shared(irf_smem_addr({self.name(op.bar)} + {bar_i}), {rank});")
        for k in range(0, n, chunk):
            at = f"irf_dst + {4 * k}" if k else "irf_dst"
            self.line(f"  irf_st_async<{chunk}>({at}, {src}{f' + {k}' if k else ''}, irf_bar);")
        self.line("}")
