# c61: prefill attention with head dimension 64 (F1, F2) with both products on wgmma (tile-tensorize{atom=wgmma})
# against the default (mma.sync), twice; chunks of 64 keys as a third variant.
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench --suite llm --systems eager,irforge"
for run in 1 2; do
$B --cases F1,F2 -o $R/f_$run \
  --variant "wgmma=$(V tile-tensorize atom=wgmma)" \
  --variant "wgmma_k64=$(V tile-tensorize atom=wgmma tile-chunk-reduce bk=64)" > $R/f_$run.log 2>&1
grep -E "^\| F" $R/f_$run/llm.md | cut -c1-220; echo "run $run at $((SECONDS - t0)) s"
done
grep -iE "error|mismatch|wrong" $R/f_1.log | head -5
