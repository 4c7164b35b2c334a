// tcalc web: the pages work without this script. With it, a switch submits the form when it
// changes, and empty fields are left out of the URL (the server would redirect to that URL).
(function () {
  var form = document.getElementById("options");
  if (!form) return;
  form.addEventListener("submit", function () {
    Array.prototype.forEach.call(form.elements, function (el) {
      if (el.name && !String(el.value).trim()) el.disabled = true;
    });
  });
  Array.prototype.forEach.call(form.querySelectorAll("select.switch"), function (el) {
    el.addEventListener("change", function () { form.requestSubmit ? form.requestSubmit() : form.submit(); });
  });
})();
