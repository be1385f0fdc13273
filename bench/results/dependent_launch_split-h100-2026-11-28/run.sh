# c87: does programmatic dependent launch help the split kernels' second kernel? F4, F6, L12 with the default
# lowering against the same without kernel-dependent-launch (tile-to-kernel spelled out without it), two rounds
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n')
NOPDL="torch-to-tensor,tensor-to-loop,$base,lower-to-kernel,cse,dce,kernel-to-cuda"
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
for round in 1 2; do
  timeout 100 python -m irforge.tools.cli bench --suite llm --cases F4,F6,L12,L4 --systems eager,irforge -o $R/pdl$round \
    --variant "nopdl=$NOPDL" > $R/pdl$round.log 2>&1
  echo "== $round"; grep -E "^\| (case|F|L)" $R/pdl$round/llm.md | cut -c1-300; grep -iE "error|refus" $R/pdl$round.log | head -3
done
echo "all $((SECONDS - t0)) s"
