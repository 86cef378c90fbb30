// hearsay report: the few interactive bits. Everything is in the page; nothing is fetched.
(function () {
  "use strict";
  const rows = Array.from(document.querySelectorAll("#timelines tbody tr[data-npc]"));
  const filter = document.getElementById("npc-filter");
  const count = document.getElementById("npc-count");
  function applyFilter() {
    const q = filter ? filter.value.trim().toLowerCase() : "";
    let shown = 0;
    for (const row of rows) {
      const hit = q === "" || row.dataset.npc.toLowerCase().includes(q);
      row.hidden = !hit;
      if (hit) shown += 1;
    }
    if (count) count.textContent = shown + " of " + rows.length + " shown";
  }
  if (filter) filter.addEventListener("input", applyFilter);
  applyFilter();

  // Clicking a fact's curve highlights it and its dots in the timelines; again to undo.
  const figures = Array.from(document.querySelectorAll("figure.fact"));
  let selected = null;
  figures.forEach(function (fig, index) {
    fig.addEventListener("click", function () {
      selected = selected === index ? null : index;
      figures.forEach(function (f, i) { f.classList.toggle("dim", selected !== null && i !== selected); });
      for (const dot of document.querySelectorAll("svg.timeline circle.learned")) {
        const mine = selected === null || Number(dot.dataset.fact) === selected;
        dot.style.opacity = mine ? "1" : "0.15";
      }
    });
  });
  document.documentElement.dataset.ready = "yes";
})();
