# c118: kernel-hoist-loads (this tree, 60ef103) against da47049 (.dev/base.tgz: a --target install of it):
# TinyLlama's decode step (runs: da47049's build; hoist: this tree's), both in one process, twice; the llm and
# seed84 cases whose CUDA the pass changes (R1, D1, D2; softmax at s32 and s128), base/new interleaved twice; then
# `irforge generate` on the hoist build (tokens, logits, speed)
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
mkdir -p /tmp/old && tar xzf .dev/base.tgz -C /tmp/old
NEW=$PWD
export IRFORGE_CACHE_DIR=$NEW/.dev/mb/cache
for i in 1 2; do
  timeout 150 python bench/decode_sweep.py step runs=.dev/mb/runs/tinyllama-bf16.json hoist=.dev/mb/hoist/tinyllama-bf16.json --profile --rounds 7 --json $R/step$i.json > $R/step$i.log 2>&1
  grep -hE "decode step|mul_mean|kernels " $R/step$i.log | cut -c1-150
  echo "step $i $((SECONDS - t0)) s"
done
unset IRFORGE_CACHE_DIR
B="python -m irforge.tools.cli bench --suite llm --cases R1,D1,D2 --systems eager,irforge"
S="python -m irforge.tools.cli bench --suite seed84 --cases softmax.QW.s32,softmax.QW.s128,softmax.TL.s32,softmax.TL.s128 --systems eager,irforge"
for i in 1 2; do
  (cd /tmp && PYTHONPATH=/tmp/old:/tmp/site timeout 100 $B -o $R/base$i > $R/base$i.log 2>&1)
  timeout 100 $B -o $R/new$i > $R/new$i.log 2>&1
  (cd /tmp && PYTHONPATH=/tmp/old:/tmp/site timeout 100 $S -o $R/sbase$i > $R/sbase$i.log 2>&1)
  timeout 100 $S -o $R/snew$i > $R/snew$i.log 2>&1
  grep -hE "^\| (R|D|softmax)" $R/base$i/llm.md $R/new$i/llm.md $R/sbase$i/seed84.md $R/snew$i/seed84.md | cut -c1-200
  echo "bench $i $((SECONDS - t0)) s"
done
mkdir -p /tmp/b && cp -r .dev/mb/hoist/* /tmp/b/ 2>/dev/null
export IRFORGE_CACHE_DIR=$NEW/.dev/mb/cache
timeout $((580 - (SECONDS - t0))) python bench/models_gpu.py run --dir /tmp/b --out $R/models --only tinyllama-bf16 --no-torch-compile > $R/models.log 2>&1; echo "rc=$?"
grep -E "irforge:|HF eager|compile:|limit|within|logits|FAIL|DIFFERENT|identical" $R/models.log | cut -c1-200 | head -20
echo "all $((SECONDS - t0)) s"
