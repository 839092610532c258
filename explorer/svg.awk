# explorer/svg.awk - the SVG pieces of the training figures (explorer/figures.c's
# style: sans-serif, plain shapes), shared by train/mktraining.sh and
# learned/mkexperiments.sh, which put this text in front of their own figure
# program (awk "$(cat explorer/svg.awk)"'...'). Each writes to the file f.
# head: the <svg> element, a white background and the title
function head(f, w, h, title) {
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", w, h, w, h > f
    printf "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", w, h > f
    printf "<text x=\"12\" y=\"24\" font-family=\"sans-serif\" font-size=\"16\" font-weight=\"bold\" fill=\"#222222\">%s</text>\n", title > f
}
# axes: the plot's frame at (x0, y0), pw x ph; a grid line and label every yt
# from ymin to ymax, an x label every xt (none when xt is 0); xl, yl the titles
function axes(f, x0, y0, pw, ph, xmin, xmax, ymin, ymax, xt, yt, xl, yl,    v, X, Y) {
    printf "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#969696\" stroke-width=\"1\"/>\n", x0, y0, pw, ph > f
    for (v = ymin; v <= ymax + 1e-9; v += yt) {
        Y = y0 + ph - (v - ymin) / (ymax - ymin) * ph
        printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eeeeee\" stroke-width=\"1\"/>\n", x0, Y, x0 + pw, Y > f
        printf "<text x=\"%d\" y=\"%.1f\" font-family=\"sans-serif\" font-size=\"11\" text-anchor=\"end\" fill=\"#555555\">%g</text>\n", x0 - 6, Y + 4, v > f
    }
    for (v = xmin; xt > 0 && v <= xmax + 1e-9; v += xt) {
        X = x0 + (v - xmin) / (xmax - xmin) * pw
        printf "<text x=\"%.1f\" y=\"%d\" font-family=\"sans-serif\" font-size=\"11\" text-anchor=\"middle\" fill=\"#555555\">%g</text>\n", X, y0 + ph + 16, v > f
    }
    printf "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"12\" text-anchor=\"middle\" fill=\"#222222\">%s</text>\n", x0 + pw / 2, y0 + ph + 34, xl > f
    printf "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"12\" fill=\"#222222\">%s</text>\n", x0, y0 - 8, yl > f
}
# legend: a line of the color and its label at (x, y)
function legend(f, x, y, color, label) {
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>\n", x, y - 4, x + 24, y - 4, color > f
    printf "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"12\" fill=\"#222222\">%s</text>\n", x + 30, y, label > f
}
