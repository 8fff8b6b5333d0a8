// The memory page's script and style, embedded at build time: the genrule
// in this package joins the script's parts (page_model.js, page_views.js,
// page_map.js, memory_page.js) and turns them and memory_page.css into the
// generated page_assets.cc, so the page needs no file, server or network.
#ifndef SPILL_MEMORY_REPORT_PAGE_PAGE_ASSETS_H_
#define SPILL_MEMORY_REPORT_PAGE_PAGE_ASSETS_H_

namespace spill {

extern const char kMemoryPageScript[];
extern const char kMemoryPageStyle[];

}  // namespace spill

#endif  // SPILL_MEMORY_REPORT_PAGE_PAGE_ASSETS_H_
