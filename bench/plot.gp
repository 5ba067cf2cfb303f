# Size against decompress speed, one panel per dtype, from the suite's CSV.
# usage: gnuplot -e "csv='bench/out/results.csv'; png='docs/bench-size-speed.png'" bench/plot.gp
# One point per method and level, each dtype's corpus files together:
# in-memory rows (section "mem", file "all"). Horizontal lines: the order-0
# entropy floor of the planes, and the sizes of xz -6 and gzip -6 on the
# whole files (whole processes: their speed is not comparable with in-memory
# figures, so only their size is drawn). Lower is smaller, right is faster.
if (!exists("csv")) csv = 'bench/out/results.csv'
if (!exists("png")) png = 'docs/bench-size-speed.png'
# The dtypes present, their entropy floors and xz/gzip sizes (floor_BF16 = 68.3,
# xz_BF16 = 73.0, gzip_BF16 = ...), which
# run_suite.sh writes beside the CSV; without them, the four corpus dtypes.
if (!exists("floors")) floors = csv[1:strlen(csv) - 11] . 'floors.gp'
if (system('test -r '.floors.' && echo y') eq 'y') load floors
if (!exists("dtypes")) dtypes = 'BF16 F16 F32 U8'

set datafile separator ','
set terminal pngcairo size 1800,1400 font 'sans,10'
set output png
set multiplot layout (words(dtypes) > 2 ? 2 : 1),(words(dtypes) > 1 ? 2 : 1) title 'ptwm beside libzstd and c-blosc on real weights, in memory: coded size against decompress speed (1 thread unless marked t2)' font 'sans,12'

set logscale x 10
set xtics (100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)
set xlabel 'decompress MB/s (log scale)'
set ylabel 'coded size, % of raw'
set grid xtics ytics mxtics
set key top left box opaque font 'sans,9'
set offsets graph 0.02, graph 0.12, graph 0.06, graph 0.04

sel(sec, dt) = (strcol(1) eq sec && strcol(2) eq 'all' && strcol(3) eq dt)
isptwm(s) = (strstrt(s, 'ptwm-') == 1)
# ptwm: every method at 1 thread, the default (microscale) at 2 as well.
ptwm_shown(dt) = sel('mem', dt) && isptwm(strcol(4)) && ($6 == 1 || strcol(4) eq 'ptwm-microscale')
label_of(m, l, t) = (isptwm(m) ? m[6:] : m) . (l ne '' ? ' '.l : '') . (t > 1 ? sprintf(' t%d', t) : '')

do for [dt in dtypes] {
    floor = exists('floor_'.dt) ? value('floor_'.dt) : NaN
    xz = exists('xz_'.dt) ? value('xz_'.dt) : NaN
    gz = exists('gzip_'.dt) ? value('gzip_'.dt) : NaN
    set title dt.' (corpus files together)'
    plot \
      csv using (sel('mem', dt) && isptwm(strcol(4)) && $6 == 1 ? $11 : 1/0):9 \
          with points pt 7 ps 1.6 lc rgb '#c0392b' title 'ptwm, 1 thread', \
      csv using (sel('mem', dt) && strcol(4) eq 'ptwm-microscale' && $6 == 2 ? $11 : 1/0):9 \
          with points pt 6 ps 1.6 lc rgb '#c0392b' title 'ptwm default, 2 threads', \
      csv using (sel('mem', dt) && strcol(4) eq 'zstd' ? $11 : 1/0):9 \
          with points pt 5 ps 1.3 lc rgb '#2471a3' title 'libzstd (level)', \
      csv using (sel('mem', dt) && strstrt(strcol(4), 'blosc') == 1 ? $11 : 1/0):9 \
          with points pt 9 ps 1.5 lc rgb '#229954' title 'c-blosc (clevel 5)', \
      csv using (sel('mem', dt) && !isptwm(strcol(4)) ? $11 : 1/0):9:(label_of(strcol(4), strcol(5), $6)) \
          with labels offset char 0.6, char 0.4 left rotate by 25 font 'sans,8' notitle, \
      csv using (ptwm_shown(dt) ? $11 : 1/0):9:(label_of(strcol(4), strcol(5), $6)) \
          with labels offset char -0.6, char -0.4 right rotate by 25 font 'sans,8' tc rgb '#c0392b' notitle, \
      floor with lines dt 2 lw 1.5 lc rgb '#555555' title 'entropy floor, order 0', \
      xz with lines dt 3 lw 1.5 lc rgb '#7d3c98' title 'xz -6, whole file (size only)', \
      gz with lines dt 4 lw 1.5 lc rgb '#a569bd' title 'gzip -6, whole file (size only)'
}
unset multiplot
