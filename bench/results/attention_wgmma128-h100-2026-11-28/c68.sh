# c68: prefill attention at head dimension 128 (F3) on wgmma (K and V slabs in blocks of 64 columns) against
# chunk and block variants and the old mma.sync layout; F1, F2 unchanged
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench --suite llm --systems eager,irforge"
$B --cases F3 -o $R/f3 \
  --variant "bk64=$(V tile-chunk-reduce bk=64)" \
  --variant "bm128=$(V tile-blockify 'bm=128 threads=256')" \
  --variant "mma=$(V tile-blockify bm=128 tile-tensorize atom=mma)" > $R/f3.log 2>&1
grep -E "^\| (F|D)" $R/f3/llm.md | cut -c1-300; echo "f3 at $((SECONDS - t0)) s"
grep -iE "error|refus|declin|Traceback" $R/f3.log | head -5
$B --cases F1,F2 -o $R/f12 > $R/f12.log 2>&1
grep -E "^\| (F|D)" $R/f12/llm.md | cut -c1-300; echo "f12 at $((SECONDS - t0)) s"
timeout 120 python -m pytest -q -x tests/test_attention_mma.py -k "gpu or cuda" 2>&1 | tail -3
echo "end at $((SECONDS - t0)) s"
