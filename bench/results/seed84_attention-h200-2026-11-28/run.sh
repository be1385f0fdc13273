# c93: seed84's attention cases (sdpa, naive_attn; fp32) on the H200 at the default, eager against irforge
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
timeout 400 python -m irforge.tools.cli bench --suite seed84 --cases 'sdpa.*,naive_attn.*' --systems eager,irforge -o $R/seed84_attention > $R/seed84_attention.log 2>&1
grep -E "^\| (case|sdpa|naive)" $R/seed84_attention/seed84.md | cut -c1-200; grep -E "geomean" $R/seed84_attention/seed84.md | head -3
echo "all $((SECONDS - t0)) s"
