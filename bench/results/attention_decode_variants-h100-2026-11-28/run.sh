# c64: decode attention F4 (and F6) against copy-engine, ring, split and dependent-launch variants, twice
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
echo "$P" | tr ',' '\n' | grep -n "dependent\|split\|tma" | head
t0=$SECONDS
B="python -m irforge.tools.cli bench --suite llm --systems eager,irforge"
for run in 1 2; do
$B --cases F4,F6 -o $R/d_$run \
  --variant "tma_all=$(V tile-tma stages=all)" \
  --variant "tma_none=$(V tile-tma stages=none)" \
  --variant "ring3=$(V tile-multi-buffer stages=3)" \
  --variant "ring6=$(V tile-multi-buffer stages=6)" \
  --variant "splits16=$(V tile-split-reduce splits=16)" \
  --variant "atomics=$(V tile-split-reduce via=atomics)" > $R/d_$run.log 2>&1
grep -E "^\| F" $R/d_$run/llm.md | cut -c1-300; echo "run $run at $((SECONDS - t0)) s"
done
grep -iE "error|refus" $R/d_1.log | head -5
