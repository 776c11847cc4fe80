;; Decode/prefill attention of one query row over one sequence's KV cache, with WebAssembly
;; SIMD (f32x4). Compiled by scripts/build-kernels.mjs into attention-wasm.ts (base64 bytes);
;; used by kernels/attention.ts. Everything lives in the imported memory (the kernel heap):
;; the KV caches of all sequences, the queries copied in, the outputs, the score scratch.
;; All pointers are byte offsets (unsigned: the heap may pass 2 GiB), 16-byte aligned, and
;; headDim is a multiple of 4.
;;
;; Layout (as in KVSequence): keys of one layer [kvHeads, capacity, headDim], values the
;; same; `headStride` = capacity*headDim*4 bytes between kv heads. Queries of the row
;; [heads, headDim], output [heads, headDim]; query head h uses kv head floor(h / group).
;;
;; The query heads of one kv head go through `attend4` four at a time, so each key and value
;; row is read once for four heads (a group that is not a multiple of 4 repeats its last
;; head in the spare lanes: same inputs, same result, written twice). Per block of four:
;;   1. scores s[p] = scale*(q_j * k_p) for the 4 heads j as one f32x4 per position p
;;      (stored interleaved [length][4]; two positions per iteration), and their maximum;
;;   2. e[p] = exp(s[p] - max), their sum (exp: Cephes' expf polynomial after reduction by
;;      ln 2, ~1-2 ulp; arguments below -87 are clamped to -87, i.e. ~ 1e-38), and e[p]_j
;;      stored splatted, one f32x4 per head j;
;;   3. out_j = sum_p e[p]_j * v_p / sum_j, 4 dims of the head at a time.
(module
  (import "env" "memory" (memory 1))

  (func $min (param $a i32) (param $b i32) (result i32)
    (select (local.get $a) (local.get $b) (i32.lt_u (local.get $a) (local.get $b))))

  ;; rows(data, rows, rowWidth, heads, kvHeads, headDim, bias, cos, sin, meta, out, scale, scores)
  ;; One layer of a decode step or prefill chunk, row after row (a row sees the positions of
  ;; its own sequence written before it, so rows of one sequence go in position order):
  ;;   data [rows, rowWidth] floats: [q (heads) | k (kvHeads) | v (kvHeads)] heads of headDim;
  ;;   bias [rowWidth] added to each row first (0: none);
  ;;   cos, sin [rows, headDim/2]: the row's rotary table row, applied to its q and k heads
  ;;     (HF rotate_half: x1' = x1 cos - x2 sin, x2' = x2 cos + x1 sin);
  ;;   meta [rows][4] i32: keys (byte offset of the layer's kv head 0), values, headStride
  ;;     (bytes between kv heads), position: the row's key and value go to that position;
  ;;   out [rows, heads*headDim]: the attended context, by attend over positions 0..position.
  (func (export "rows")
    (param $data i32) (param $rows i32) (param $rowWidth i32) (param $heads i32) (param $kvHeads i32)
    (param $headDim i32) (param $bias i32) (param $cos i32) (param $sin i32) (param $meta i32)
    (param $out i32) (param $scale f32) (param $scores i32)
    (local $r i32) (local $row i32) (local $rowBytes i32) (local $hdBytes i32) (local $halfBytes i32)
    (local $c i32) (local $h i32) (local $x i32) (local $cr i32) (local $sr i32) (local $m i32)
    (local $keys i32) (local $values i32) (local $stride i32) (local $position i32)
    (local $src i32) (local $dst i32) (local $ropeHeads i32) (local $vecHalf i32)
    (local $co v128) (local $si v128) (local $x1 v128) (local $x2 v128)
    (local $cs f32) (local $ss f32) (local $y1 f32) (local $y2 f32)
    (local.set $rowBytes (i32.shl (local.get $rowWidth) (i32.const 2)))
    (local.set $hdBytes (i32.shl (local.get $headDim) (i32.const 2)))
    (local.set $halfBytes (i32.shr_u (local.get $hdBytes) (i32.const 1)))
    (local.set $vecHalf (i32.and (local.get $halfBytes) (i32.const -16)))
    (local.set $ropeHeads (i32.add (local.get $heads) (local.get $kvHeads)))
    (block $done
      (loop $eachRow
        (br_if $done (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $row (i32.add (local.get $data) (i32.mul (local.get $r) (local.get $rowBytes))))
        ;; bias
        (if (local.get $bias)
          (then
            (local.set $c (i32.const 0))
            (loop $biases
              (v128.store (i32.add (local.get $row) (local.get $c))
                (f32x4.add (v128.load (i32.add (local.get $row) (local.get $c))) (v128.load (i32.add (local.get $bias) (local.get $c)))))
              (local.set $c (i32.add (local.get $c) (i32.const 16)))
              (br_if $biases (i32.lt_u (local.get $c) (local.get $rowBytes))))))
        ;; rotary on the q and k heads
        (local.set $cr (i32.add (local.get $cos) (i32.mul (local.get $r) (local.get $halfBytes))))
        (local.set $sr (i32.add (local.get $sin) (i32.mul (local.get $r) (local.get $halfBytes))))
        (local.set $h (i32.const 0))
        (loop $ropeHead
          (local.set $x (i32.add (local.get $row) (i32.mul (local.get $h) (local.get $hdBytes))))
          (local.set $c (i32.const 0))
          (block $vecDone
            (br_if $vecDone (i32.ge_u (local.get $c) (local.get $vecHalf)))
            (loop $vec
              (local.set $co (v128.load (i32.add (local.get $cr) (local.get $c))))
              (local.set $si (v128.load (i32.add (local.get $sr) (local.get $c))))
              (local.set $x1 (v128.load (i32.add (local.get $x) (local.get $c))))
              (local.set $x2 (v128.load (i32.add (i32.add (local.get $x) (local.get $halfBytes)) (local.get $c))))
              (v128.store (i32.add (local.get $x) (local.get $c))
                (f32x4.sub (f32x4.mul (local.get $x1) (local.get $co)) (f32x4.mul (local.get $x2) (local.get $si))))
              (v128.store (i32.add (i32.add (local.get $x) (local.get $halfBytes)) (local.get $c))
                (f32x4.add (f32x4.mul (local.get $x2) (local.get $co)) (f32x4.mul (local.get $x1) (local.get $si))))
              (local.set $c (i32.add (local.get $c) (i32.const 16)))
              (br_if $vec (i32.lt_u (local.get $c) (local.get $vecHalf)))))
          ;; the rest of a half that is not a multiple of 4 floats
          (block $scalarDone
            (br_if $scalarDone (i32.ge_u (local.get $c) (local.get $halfBytes)))
            (loop $scalar
              (local.set $cs (f32.load (i32.add (local.get $cr) (local.get $c))))
              (local.set $ss (f32.load (i32.add (local.get $sr) (local.get $c))))
              (local.set $y1 (f32.load (i32.add (local.get $x) (local.get $c))))
              (local.set $y2 (f32.load (i32.add (i32.add (local.get $x) (local.get $halfBytes)) (local.get $c))))
              (f32.store (i32.add (local.get $x) (local.get $c))
                (f32.sub (f32.mul (local.get $y1) (local.get $cs)) (f32.mul (local.get $y2) (local.get $ss))))
              (f32.store (i32.add (i32.add (local.get $x) (local.get $halfBytes)) (local.get $c))
                (f32.add (f32.mul (local.get $y2) (local.get $cs)) (f32.mul (local.get $y1) (local.get $ss))))
              (local.set $c (i32.add (local.get $c) (i32.const 4)))
              (br_if $scalar (i32.lt_u (local.get $c) (local.get $halfBytes)))))
          (local.set $h (i32.add (local.get $h) (i32.const 1)))
          (br_if $ropeHead (i32.lt_u (local.get $h) (local.get $ropeHeads))))
        ;; this row's key and value into its sequence's cache
        (local.set $m (i32.add (local.get $meta) (i32.shl (local.get $r) (i32.const 4))))
        (local.set $keys (i32.load (local.get $m)))
        (local.set $values (i32.load offset=4 (local.get $m)))
        (local.set $stride (i32.load offset=8 (local.get $m)))
        (local.set $position (i32.load offset=12 (local.get $m)))
        (local.set $h (i32.const 0))
        (loop $kvHead
          (local.set $c (i32.const 0))
          (local.set $src (i32.add (local.get $row) (i32.mul (i32.add (local.get $heads) (local.get $h)) (local.get $hdBytes))))
          (local.set $dst (i32.add (local.get $keys) (i32.add (i32.mul (local.get $h) (local.get $stride)) (i32.mul (local.get $position) (local.get $hdBytes)))))
          (loop $copyKey
            (v128.store (i32.add (local.get $dst) (local.get $c)) (v128.load (i32.add (local.get $src) (local.get $c))))
            (local.set $c (i32.add (local.get $c) (i32.const 16)))
            (br_if $copyKey (i32.lt_u (local.get $c) (local.get $hdBytes))))
          (local.set $c (i32.const 0))
          (local.set $src (i32.add (local.get $src) (i32.mul (local.get $kvHeads) (local.get $hdBytes))))
          (local.set $dst (i32.add (local.get $values) (i32.add (i32.mul (local.get $h) (local.get $stride)) (i32.mul (local.get $position) (local.get $hdBytes)))))
          (loop $copyValue
            (v128.store (i32.add (local.get $dst) (local.get $c)) (v128.load (i32.add (local.get $src) (local.get $c))))
            (local.set $c (i32.add (local.get $c) (i32.const 16)))
            (br_if $copyValue (i32.lt_u (local.get $c) (local.get $hdBytes))))
          (local.set $h (i32.add (local.get $h) (i32.const 1)))
          (br_if $kvHead (i32.lt_u (local.get $h) (local.get $kvHeads))))
        (call $attend
          (local.get $row)
          (i32.add (local.get $out) (i32.mul (local.get $r) (i32.mul (local.get $heads) (local.get $hdBytes))))
          (local.get $keys) (local.get $values) (local.get $stride) (i32.add (local.get $position) (i32.const 1))
          (local.get $kvHeads) (i32.div_u (local.get $heads) (local.get $kvHeads)) (local.get $headDim)
          (local.get $scale) (local.get $scores))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $eachRow))))

  ;; attend(q, out, k, v, headStride, length, kvHeads, group, headDim, scale, scores)
  ;; scores: scratch of >= 80*length bytes.
  (func $attend (export "attend")
    (param $q i32) (param $out i32) (param $k i32) (param $v i32) (param $headStride i32)
    (param $length i32) (param $kvHeads i32) (param $group i32) (param $headDim i32)
    (param $scale f32) (param $scores i32)
    (local $rowBytes i32) (local $h i32) (local $b i32) (local $last i32)
    (local $m1 i32) (local $m2 i32) (local $m3 i32) (local $kh i32) (local $vh i32)
    (local.set $rowBytes (i32.shl (local.get $headDim) (i32.const 2)))
    (block $done
      (loop $heads
        (br_if $done (i32.ge_u (local.get $h) (local.get $kvHeads)))
        (local.set $kh (i32.add (local.get $k) (i32.mul (local.get $h) (local.get $headStride))))
        (local.set $vh (i32.add (local.get $v) (i32.mul (local.get $h) (local.get $headStride))))
        ;; query heads b .. last of this kv head, four at a time
        (local.set $b (i32.mul (local.get $h) (local.get $group)))
        (local.set $last (i32.sub (i32.add (local.get $b) (local.get $group)) (i32.const 1)))
        (loop $blocks
          (local.set $m1 (call $min (i32.add (local.get $b) (i32.const 1)) (local.get $last)))
          (local.set $m2 (call $min (i32.add (local.get $b) (i32.const 2)) (local.get $last)))
          (local.set $m3 (call $min (i32.add (local.get $b) (i32.const 3)) (local.get $last)))
          (call $attend4
            (i32.add (local.get $q) (i32.mul (local.get $b) (local.get $rowBytes)))
            (i32.add (local.get $q) (i32.mul (local.get $m1) (local.get $rowBytes)))
            (i32.add (local.get $q) (i32.mul (local.get $m2) (local.get $rowBytes)))
            (i32.add (local.get $q) (i32.mul (local.get $m3) (local.get $rowBytes)))
            (i32.add (local.get $out) (i32.mul (local.get $b) (local.get $rowBytes)))
            (i32.add (local.get $out) (i32.mul (local.get $m1) (local.get $rowBytes)))
            (i32.add (local.get $out) (i32.mul (local.get $m2) (local.get $rowBytes)))
            (i32.add (local.get $out) (i32.mul (local.get $m3) (local.get $rowBytes)))
            (local.get $kh) (local.get $vh) (local.get $length) (local.get $rowBytes)
            (local.get $scale) (local.get $scores))
          (local.set $b (i32.add (local.get $b) (i32.const 4)))
          (br_if $blocks (i32.le_u (local.get $b) (local.get $last))))
        (local.set $h (i32.add (local.get $h) (i32.const 1)))
        (br $heads))))

  ;; Four query heads (q0..q3 -> o0..o3) over `length` key/value rows of `rowBytes` each.
  ;; scores: scratch of 80 * length bytes: [length][4] raw scores, then [length][4][4] the
  ;; exponentials splatted (one f32x4 per head and position, so that pass 3 multiplies by a
  ;; loaded vector instead of shuffling).
  (func $attend4
    (param $q0 i32) (param $q1 i32) (param $q2 i32) (param $q3 i32)
    (param $o0 i32) (param $o1 i32) (param $o2 i32) (param $o3 i32)
    (param $k i32) (param $v i32) (param $length i32) (param $rowBytes i32)
    (param $scale f32) (param $scores i32)
    (local $c i32) (local $kp i32) (local $kp2 i32) (local $vp i32) (local $sp i32) (local $dp i32)
    (local $end i32) (local $pairsEnd i32) (local $splatsEnd i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (local $b0 v128) (local $b1 v128) (local $b2 v128) (local $b3 v128)
    (local $x v128) (local $y v128) (local $t v128) (local $s v128) (local $max v128) (local $sum v128)
    (local $fx v128) (local $e v128) (local $scaleV v128)
    (local $i0 v128) (local $i1 v128) (local $i2 v128) (local $i3 v128)

    (local.set $end (i32.add (local.get $scores) (i32.shl (local.get $length) (i32.const 4))))
    (local.set $pairsEnd (i32.add (local.get $scores) (i32.shl (i32.and (local.get $length) (i32.const -2)) (i32.const 4))))
    (local.set $splatsEnd (i32.add (local.get $end) (i32.shl (local.get $length) (i32.const 6))))
    (local.set $scaleV (f32x4.splat (local.get $scale)))

    ;; 1. scores and their maximum, two positions at a time (each q chunk loaded once for both)
    (local.set $max (v128.const f32x4 -inf -inf -inf -inf))
    (local.set $kp (local.get $k))
    (local.set $sp (local.get $scores))
    (block $pairsDone
      (br_if $pairsDone (i32.ge_u (local.get $sp) (local.get $pairsEnd)))
      (loop $pairs
      (local.set $a0 (v128.const i32x4 0 0 0 0))
      (local.set $a1 (v128.const i32x4 0 0 0 0))
      (local.set $a2 (v128.const i32x4 0 0 0 0))
      (local.set $a3 (v128.const i32x4 0 0 0 0))
      (local.set $b0 (v128.const i32x4 0 0 0 0))
      (local.set $b1 (v128.const i32x4 0 0 0 0))
      (local.set $b2 (v128.const i32x4 0 0 0 0))
      (local.set $b3 (v128.const i32x4 0 0 0 0))
      (local.set $kp2 (i32.add (local.get $kp) (local.get $rowBytes)))
      (local.set $c (i32.const 0))
      (loop $dims
        (local.set $x (v128.load (i32.add (local.get $kp) (local.get $c))))
        (local.set $y (v128.load (i32.add (local.get $kp2) (local.get $c))))
        (local.set $t (v128.load (i32.add (local.get $q0) (local.get $c))))
        (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $t) (local.get $x))))
        (local.set $b0 (f32x4.add (local.get $b0) (f32x4.mul (local.get $t) (local.get $y))))
        (local.set $t (v128.load (i32.add (local.get $q1) (local.get $c))))
        (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $t) (local.get $x))))
        (local.set $b1 (f32x4.add (local.get $b1) (f32x4.mul (local.get $t) (local.get $y))))
        (local.set $t (v128.load (i32.add (local.get $q2) (local.get $c))))
        (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $t) (local.get $x))))
        (local.set $b2 (f32x4.add (local.get $b2) (f32x4.mul (local.get $t) (local.get $y))))
        (local.set $t (v128.load (i32.add (local.get $q3) (local.get $c))))
        (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $t) (local.get $x))))
        (local.set $b3 (f32x4.add (local.get $b3) (f32x4.mul (local.get $t) (local.get $y))))
        (local.set $c (i32.add (local.get $c) (i32.const 16)))
        (br_if $dims (i32.lt_u (local.get $c) (local.get $rowBytes))))
        ;; [sum a0, sum a1, sum a2, sum a3] * scale: pairwise sums of lanes, then of pairs
        (local.set $a0 (f32x4.add
          (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $a0) (local.get $a1))
          (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $a0) (local.get $a1))))
        (local.set $a2 (f32x4.add
          (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $a2) (local.get $a3))
          (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $a2) (local.get $a3))))
        (local.set $s (f32x4.mul
          (f32x4.add
            (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (local.get $a0) (local.get $a2))
            (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (local.get $a0) (local.get $a2)))
          (local.get $scaleV)))
        (v128.store (local.get $sp) (local.get $s))
        (local.set $max (f32x4.pmax (local.get $max) (local.get $s)))
        ;; [sum b0, sum b1, sum b2, sum b3] * scale: pairwise sums of lanes, then of pairs
        (local.set $b0 (f32x4.add
          (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $b0) (local.get $b1))
          (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $b0) (local.get $b1))))
        (local.set $b2 (f32x4.add
          (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $b2) (local.get $b3))
          (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $b2) (local.get $b3))))
        (local.set $s (f32x4.mul
          (f32x4.add
            (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (local.get $b0) (local.get $b2))
            (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (local.get $b0) (local.get $b2)))
          (local.get $scaleV)))
        (v128.store offset=16 (local.get $sp) (local.get $s))
        (local.set $max (f32x4.pmax (local.get $max) (local.get $s)))
        (local.set $kp (i32.add (local.get $kp2) (local.get $rowBytes)))
        (local.set $sp (i32.add (local.get $sp) (i32.const 32)))
        (br_if $pairs (i32.lt_u (local.get $sp) (local.get $pairsEnd)))))
    ;; the last position of an odd length
    (if (i32.lt_u (local.get $sp) (local.get $end))
      (then
        (local.set $a0 (v128.const i32x4 0 0 0 0))
        (local.set $a1 (v128.const i32x4 0 0 0 0))
        (local.set $a2 (v128.const i32x4 0 0 0 0))
        (local.set $a3 (v128.const i32x4 0 0 0 0))
        (local.set $c (i32.const 0))
        (loop $dims
          (local.set $x (v128.load (i32.add (local.get $kp) (local.get $c))))
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (v128.load (i32.add (local.get $q0) (local.get $c))) (local.get $x))))
          (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (v128.load (i32.add (local.get $q1) (local.get $c))) (local.get $x))))
          (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (v128.load (i32.add (local.get $q2) (local.get $c))) (local.get $x))))
          (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (v128.load (i32.add (local.get $q3) (local.get $c))) (local.get $x))))
          (local.set $c (i32.add (local.get $c) (i32.const 16)))
          (br_if $dims (i32.lt_u (local.get $c) (local.get $rowBytes))))
        ;; [sum a0, sum a1, sum a2, sum a3] * scale: pairwise sums of lanes, then of pairs
        (local.set $a0 (f32x4.add
          (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $a0) (local.get $a1))
          (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $a0) (local.get $a1))))
        (local.set $a2 (f32x4.add
          (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $a2) (local.get $a3))
          (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $a2) (local.get $a3))))
        (local.set $s (f32x4.mul
          (f32x4.add
            (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (local.get $a0) (local.get $a2))
            (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (local.get $a0) (local.get $a2)))
          (local.get $scaleV)))
        (v128.store (local.get $sp) (local.get $s))
        (local.set $max (f32x4.pmax (local.get $max) (local.get $s)))
      ))

    ;; 2. e = exp(s - max), their sums, and e splatted per head
    (local.set $sum (v128.const i32x4 0 0 0 0))
    (local.set $sp (local.get $scores))
    (local.set $dp (local.get $end))
    (loop $exps
      ;; x = max(s - max, -87); fx = round(x / ln 2); x -= fx * ln 2 (in two parts)
      (local.set $x (f32x4.pmax
        (f32x4.sub (v128.load (local.get $sp)) (local.get $max))
        (v128.const f32x4 -87 -87 -87 -87)))
      (local.set $fx (f32x4.nearest (f32x4.mul (local.get $x) (v128.const f32x4 1.44269504088896341 1.44269504088896341 1.44269504088896341 1.44269504088896341))))
      (local.set $x (f32x4.sub (local.get $x) (f32x4.mul (local.get $fx) (v128.const f32x4 0.693359375 0.693359375 0.693359375 0.693359375))))
      (local.set $x (f32x4.add (local.get $x) (f32x4.mul (local.get $fx) (v128.const f32x4 2.12194440e-4 2.12194440e-4 2.12194440e-4 2.12194440e-4))))
      ;; e^x = 1 + x + x^2 * P(x) (Cephes expf)
      (local.set $t (f32x4.add (f32x4.mul (v128.const f32x4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4) (local.get $x))
                               (v128.const f32x4 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3)))
      (local.set $t (f32x4.add (f32x4.mul (local.get $t) (local.get $x)) (v128.const f32x4 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3)))
      (local.set $t (f32x4.add (f32x4.mul (local.get $t) (local.get $x)) (v128.const f32x4 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2)))
      (local.set $t (f32x4.add (f32x4.mul (local.get $t) (local.get $x)) (v128.const f32x4 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1)))
      (local.set $t (f32x4.add (f32x4.mul (local.get $t) (local.get $x)) (v128.const f32x4 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1)))
      (local.set $t (f32x4.add
        (f32x4.add (f32x4.mul (local.get $t) (f32x4.mul (local.get $x) (local.get $x))) (local.get $x))
        (v128.const f32x4 1 1 1 1)))
      ;; * 2^fx, built in the exponent bits (fx in [-126, 0])
      (local.set $e (f32x4.mul (local.get $t)
        (i32x4.shl (i32x4.add (i32x4.trunc_sat_f32x4_s (local.get $fx)) (v128.const i32x4 127 127 127 127)) (i32.const 23))))
      (local.set $sum (f32x4.add (local.get $sum) (local.get $e)))
      (v128.store (local.get $dp) (i8x16.shuffle 0 1 2 3 0 1 2 3 0 1 2 3 0 1 2 3 (local.get $e) (local.get $e)))
      (v128.store offset=16 (local.get $dp) (i8x16.shuffle 4 5 6 7 4 5 6 7 4 5 6 7 4 5 6 7 (local.get $e) (local.get $e)))
      (v128.store offset=32 (local.get $dp) (i8x16.shuffle 8 9 10 11 8 9 10 11 8 9 10 11 8 9 10 11 (local.get $e) (local.get $e)))
      (v128.store offset=48 (local.get $dp) (i8x16.shuffle 12 13 14 15 12 13 14 15 12 13 14 15 12 13 14 15 (local.get $e) (local.get $e)))
      (local.set $sp (i32.add (local.get $sp) (i32.const 16)))
      (local.set $dp (i32.add (local.get $dp) (i32.const 64)))
      (br_if $exps (i32.lt_u (local.get $sp) (local.get $end))))
    (local.set $sum (f32x4.div (v128.const f32x4 1 1 1 1) (local.get $sum)))
    (local.set $i0 (i8x16.shuffle 0 1 2 3 0 1 2 3 0 1 2 3 0 1 2 3 (local.get $sum) (local.get $sum)))
    (local.set $i1 (i8x16.shuffle 4 5 6 7 4 5 6 7 4 5 6 7 4 5 6 7 (local.get $sum) (local.get $sum)))
    (local.set $i2 (i8x16.shuffle 8 9 10 11 8 9 10 11 8 9 10 11 8 9 10 11 (local.get $sum) (local.get $sum)))
    (local.set $i3 (i8x16.shuffle 12 13 14 15 12 13 14 15 12 13 14 15 12 13 14 15 (local.get $sum) (local.get $sum)))

    ;; 3. out_j = sum_p e[p]_j * v_p * (1 / sum_j), four dims at a time
    (local.set $c (i32.const 0))
    (loop $chunks
      (local.set $a0 (v128.const i32x4 0 0 0 0))
      (local.set $a1 (v128.const i32x4 0 0 0 0))
      (local.set $a2 (v128.const i32x4 0 0 0 0))
      (local.set $a3 (v128.const i32x4 0 0 0 0))
      (local.set $vp (i32.add (local.get $v) (local.get $c)))
      (local.set $dp (local.get $end))
      (loop $weighted
        (local.set $x (v128.load (local.get $vp)))
        (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (v128.load (local.get $dp)) (local.get $x))))
        (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (v128.load offset=16 (local.get $dp)) (local.get $x))))
        (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (v128.load offset=32 (local.get $dp)) (local.get $x))))
        (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (v128.load offset=48 (local.get $dp)) (local.get $x))))
        (local.set $vp (i32.add (local.get $vp) (local.get $rowBytes)))
        (local.set $dp (i32.add (local.get $dp) (i32.const 64)))
        (br_if $weighted (i32.lt_u (local.get $dp) (local.get $splatsEnd))))
      (v128.store (i32.add (local.get $o0) (local.get $c)) (f32x4.mul (local.get $a0) (local.get $i0)))
      (v128.store (i32.add (local.get $o1) (local.get $c)) (f32x4.mul (local.get $a1) (local.get $i1)))
      (v128.store (i32.add (local.get $o2) (local.get $c)) (f32x4.mul (local.get $a2) (local.get $i2)))
      (v128.store (i32.add (local.get $o3) (local.get $c)) (f32x4.mul (local.get $a3) (local.get $i3)))
      (local.set $c (i32.add (local.get $c) (i32.const 16)))
      (br_if $chunks (i32.lt_u (local.get $c) (local.get $rowBytes)))))
)
