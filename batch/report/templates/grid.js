(() => {
  const form = document.getElementById("grid-controls"), grid = document.getElementById("grid");
  if (!form || !grid) return;
  const body = grid.tBodies[0], rows = [...body.rows], $ = (id) => document.getElementById(id);
  const num = (row, key) => Number(row.dataset[key]);
  const keys = {i: (r) => num(r, "i"), f: (r) => -num(r, "f"), p: (r) => num(r, "p")};
  function apply() {
    const only = $("only-failures").checked, kind = $("category").value, how = $("sort").value;
    let shown = 0;
    for (const row of rows) {
      const wanted = kind === "" || row.dataset.k.includes(` ${kind} `);
      row.hidden = (only && num(row, "f") === 0) || !wanted;
      shown += row.hidden ? 0 : 1;
    }
    const col = Number(how.slice(1));
    const by = how === "c" ? (a, b) => a.dataset.c.localeCompare(b.dataset.c)
      : how[0] === "m" ? (a, b) => num(a.cells[col], "r") - num(b.cells[col], "r")
      : (a, b) => keys[how](a) - keys[how](b);
    body.append(...[...rows].sort((a, b) => by(a, b) || num(a, "i") - num(b, "i")));
    $("shown").textContent = `${shown} of ${rows.length} cases`;
  }
  grid.tHead.querySelectorAll("th.model").forEach((th, i) => {
    th.addEventListener("click", () => { $("sort").value = `m${i + 1}`; apply(); });
  });
  form.addEventListener("change", apply);
  form.hidden = false;
  apply();
})();
