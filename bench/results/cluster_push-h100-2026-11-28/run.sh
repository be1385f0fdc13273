# c85: the cluster combine pushing carriers with st.async onto the receivers mbarriers (no cluster barrier at the combine)
# the default (via partials), twice; ncu of F4's cluster kernel
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench"
for round in 1 2; do
  timeout 100 $B --suite llm --cases F4,F6,L12,L4 --systems eager,irforge -o $R/pushed$round \
    --variant "cluster=$(V tile-split-reduce via=cluster)" > $R/pushed$round.log 2>&1
  echo "== $round"; grep -E "^\| (case|F|L)" $R/pushed$round/llm.md | cut -c1-300
done
ncu --clock-control none --cache-control all --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed -k regex:'^k_scaled_dot_product_attention$' -c 2 \
  python -m irforge.tools.cli bench --suite llm --cases F4 --systems eager,irforge --variant "cluster=$(V tile-split-reduce via=cluster)" --reps 2 --warmup 0 > $R/ncu_cluster.txt 2>&1
grep -vE "^==PROF==|^\s*$|----" $R/ncu_cluster.txt | grep -E "^  k_|gpu__time|dram__|Stall|stall|Warp Cycles|cycles being" | head -30
echo "all $((SECONDS - t0)) s"
