// The API docs page (templates/api/docs.html): Swagger UI over our OpenAPI schema, from
// drf-spectacular-sidecar's static bundle. No inline script (CSP); the page hands the schema
// URL and the CSRF token over in data attributes.
(function () {
  "use strict";

  function init() {
    var box = document.getElementById("swagger-ui");
    if (!box || typeof window.SwaggerUIBundle !== "function") return;
    var csrfToken = box.dataset.csrfToken;
    window.SwaggerUIBundle({
      url: box.dataset.schemaUrl,
      dom_id: "#swagger-ui",
      presets: [window.SwaggerUIBundle.presets.apis],
      layout: "BaseLayout",
      deepLinking: true,
      validatorUrl: null, // never send the schema to an outside validator
      // "Try it out" runs as the signed-in user (session cookie); unsafe methods need the
      // CSRF token in a header, as for htmx.
      requestInterceptor: function (request) {
        if (csrfToken) request.headers["X-CSRFToken"] = csrfToken;
        return request;
      },
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
