// Click a summary-table header to sort by that column; click again to reverse.
// Sorting is a convenience: the report reads fully without JavaScript.
document.querySelectorAll('table.summary thead th').forEach(function (th, i) {
  th.addEventListener('click', function () {
    var tb = th.closest('table').tBodies[0];
    var rows = Array.prototype.slice.call(tb.rows);
    var d = th.dataset.dir === 'a' ? -1 : 1;
    th.dataset.dir = d > 0 ? 'a' : 'd';
    // numeric cells carry data-v ('' = no finite value, sorted last); the others sort by their text
    function key(r) {
      var c = r.cells[i], v = c.dataset.v;
      return v !== undefined ? (v === '' ? NaN : parseFloat(v)) : c.textContent.trim().toLowerCase();
    }
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      if (typeof x === 'number') {
        if (isNaN(x)) return 1;
        if (isNaN(y)) return -1;
        return d * (x - y);
      }
      return d * (x < y ? -1 : x > y ? 1 : 0);
    });
    rows.forEach(function (r) { tb.appendChild(r); });
  });
});
