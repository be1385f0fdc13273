# c97: tune TinyLlama-1.1B bf16's decode-step kernels (irforge tune MODEL --step decode), then the decode step
# compiled with the winners against the heuristics' (bench/decode_sweep.py step: interleaved, in-graph profile)
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
I="python -m irforge.tools.cli"
SIZES="--dtype bf16 --batch 1 --prompt-len 16 --max-len 48"
export IRFORGE_CACHE_DIR=/tmp/icache
timeout 120 python bench/models_gpu.py compile --dir /tmp/build/base --only tinyllama-bf16 > $R/compile_base.log 2>&1
echo "base compiled $((SECONDS - t0)) s"; tail -2 $R/compile_base.log
timeout 330 $I tune tinyllama-1.1b $SIZES --step decode --db $R/tune.sqlite --budget 80 --time 18 --jobs 14 > $R/tune.log 2>&1
echo "tuned $((SECONDS - t0)) s rc=$?"; tail -40 $R/tune.log | cut -c1-220
timeout 90 python bench/models_gpu.py compile --dir /tmp/build/tuned --only tinyllama-bf16 --db $R/tune.sqlite > $R/compile_tuned.log 2>&1
echo "tuned compiled $((SECONDS - t0)) s"; tail -2 $R/compile_tuned.log
timeout 120 python bench/decode_sweep.py step base=/tmp/build/base/tinyllama-bf16.json tuned=/tmp/build/tuned/tinyllama-bf16.json --profile --rounds 5 --json $R/step.json > $R/step.log 2>&1
cat $R/step.log | cut -c1-200 | tail -45
echo "all $((SECONDS - t0)) s"
