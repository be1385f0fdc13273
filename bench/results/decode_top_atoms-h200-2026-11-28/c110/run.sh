# c110: TinyLlama's decode step, 345e855's build run by 345e855's code (head) against this tree's (ghost: the mma
# atoms' top halves accumulating in place, Q's fragments read once), alternated three times; then F4 and F6 at
# this tree with ring and warp variants around the default (4 warps, rings of 3 chunks of 256 keys)
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
mkdir -p /tmp/old && tar xzf .dev/base.tgz -C /tmp/old
NEW=$PWD
export IRFORGE_CACHE_DIR=$NEW/.dev/mb/cache
for i in 1 2 3; do
  (cd /tmp && PYTHONPATH=/tmp/old:/tmp/site timeout 120 python /tmp/old/bench/decode_sweep.py step head=$NEW/.dev/mb/head/tinyllama-bf16.json --profile --rounds 7 --json $R/head$i.json > $R/head$i.log 2>&1)
  timeout 120 python bench/decode_sweep.py step ghost=.dev/mb/ghost/tinyllama-bf16.json --profile --rounds 7 --json $R/ghost$i.json > $R/ghost$i.log 2>&1
  grep -hE "decode step|scaled_dot|kernels " $R/head$i.log $R/ghost$i.log | cut -c1-160
  echo "step $i $((SECONDS - t0)) s"
done
unset IRFORGE_CACHE_DIR
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n')
mk() { echo "torch-to-tensor,tensor-to-loop,$(echo "$base" | sed "$1"),tile-to-kernel,kernel-to-cuda"; }
W2R6=$(mk 's/tile-split-reduce,/tile-split-reduce{splits=2 across=warps},/;s/tile-multi-buffer,/tile-multi-buffer{stages=6},/')
W2R4=$(mk 's/tile-split-reduce,/tile-split-reduce{splits=2 across=warps},/;s/tile-multi-buffer,/tile-multi-buffer{stages=4},/')
R2=$(mk 's/tile-multi-buffer,/tile-multi-buffer{stages=2},/')
for i in 1 2; do
  timeout 150 python -m irforge.tools.cli bench --suite llm --cases F4,F6 --systems eager,irforge --variant "w2r6=$W2R6" --variant "w2r4=$W2R4" --variant "r2=$R2" -o $R/var$i > $R/var$i.log 2>&1
  grep -hE "^\| (F)[0-9]|^\| case" $R/var$i/llm.md | cut -c1-250
  echo "var $i $((SECONDS - t0)) s"
done
echo "all $((SECONDS - t0)) s"
